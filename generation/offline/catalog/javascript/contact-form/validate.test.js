const { validateContact, MESSAGES } = require('./validate');

const form = (fields) => ({
  name: 'Jo',
  email: 'jo@example.com',
  message: 'x'.repeat(20),
  topic: 'general',
  orderNumber: '',
  ...fields,
});

test('questions about orders', () => {
  expect([
    form({ topic: 'order', orderNumber: '123456' }),
    form({ topic: 'order', orderNumber: '12345', name: 'J' }),
    form({ topic: 'returns', email: 'jo@example', message: 'm'.repeat(1000) }),
    form({ name: 'n'.repeat(60), message: ' '.repeat(5) + 'y'.repeat(19) }),
  ].map(validateContact)).toEqual([
    {},
    { name: MESSAGES.name, orderNumber: MESSAGES.orderNumber },
    { email: MESSAGES.email },
    { message: MESSAGES.message },
  ]);
});

test('names and messages at their limits', () => {
  expect([
    form({ name: '  Al  ', message: 'z'.repeat(1000), topic: 'order', orderNumber: '000042' }),
    form({ name: 'n'.repeat(60), email: 'al @example.com' }),
    form({ name: ' A ', message: 'a message too short' }),
    form({ topic: 'order', orderNumber: 'ABC123', message: 'm'.repeat(20) }),
  ].map(validateContact)).toEqual([
    {},
    { email: MESSAGES.email },
    { name: MESSAGES.name, message: MESSAGES.message },
    { orderNumber: MESSAGES.orderNumber },
  ]);
});

test('a busy morning in the support inbox', () => {
  expect([
    form({ name: 'Li', email: 'li@shop.co.uk', topic: 'order', orderNumber: '987654' }),
    form({ name: 'B', email: 'b@x', message: 'm'.repeat(19) }),
    form({ name: 'r'.repeat(60), message: 'q'.repeat(1000), topic: 'delivery' }),
    form({ topic: 'order', orderNumber: '' }),
  ].map(validateContact)).toEqual([
    {},
    { name: MESSAGES.name, email: MESSAGES.email, message: MESSAGES.message },
    {},
    { orderNumber: MESSAGES.orderNumber },
  ]);
});
