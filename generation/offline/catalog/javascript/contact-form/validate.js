'use strict';

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const ORDER_NUMBER = /^\d{6}$/;

const MESSAGES = {
  name: 'Please enter your name (2 to 60 characters).',
  email: 'Please enter a valid email address.',
  message: 'Please write between 20 and 1000 characters.',
  orderNumber: 'Questions about an order need its 6-digit order number.',
};

function validateContact(form) {
  const errors = {};
  const name = form.name.trim();
  if (name.length < 2 || name.length > 60) {
    errors.name = MESSAGES.name;
  }
  if (!EMAIL.test(form.email)) {
    errors.email = MESSAGES.email;
  }
  const message = form.message.trim();
  if (message.length < 20 || message.length > 1000) {
    errors.message = MESSAGES.message;
  }
  if (form.topic === 'order' && !ORDER_NUMBER.test(form.orderNumber)) {
    errors.orderNumber = MESSAGES.orderNumber;
  }
  return errors;
}

module.exports = { validateContact, MESSAGES };
