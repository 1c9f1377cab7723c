const { validateContact, MESSAGES } = require('./validate');

const note = 'My parcel arrived with a cracked lid, please help.';

test('an order question with every field right, trimmed', () => {
  const form = { name: '  Jo  ', email: 'jo@shop.example', message: `  ${note}  `, topic: 'order', orderNumber: '004211' };
  expect(validateContact(form)).toEqual({});
});

test('every field wrong at once', () => {
  const form = { name: 'J', email: 'jo@shop', message: 'too short', topic: 'order', orderNumber: '42' };
  expect(validateContact(form)).toEqual({
    name: MESSAGES.name,
    email: MESSAGES.email,
    message: MESSAGES.message,
    orderNumber: MESSAGES.orderNumber,
  });
});
