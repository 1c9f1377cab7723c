CREATE TABLE customers (
    id   integer PRIMARY KEY,
    name text NOT NULL
);

CREATE TABLE invoices (
    id           integer PRIMARY KEY,
    customer_id  integer NOT NULL REFERENCES customers (id),
    due_on       date NOT NULL,
    amount_cents integer NOT NULL CHECK (amount_cents > 0)
);

CREATE TABLE payments (
    id           integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    invoice_id   integer NOT NULL REFERENCES invoices (id),
    paid_on      date NOT NULL,
    amount_cents integer NOT NULL CHECK (amount_cents > 0)
);
