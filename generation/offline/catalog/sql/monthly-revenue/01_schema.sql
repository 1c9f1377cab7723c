CREATE TABLE orders (
    id          integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    placed_on   date NOT NULL,
    total_cents integer NOT NULL CHECK (total_cents > 0),
    status      text NOT NULL CHECK (status IN ('paid', 'refunded', 'cancelled'))
);
