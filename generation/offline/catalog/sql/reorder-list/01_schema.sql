CREATE TABLE products (
    sku           text PRIMARY KEY,
    name          text NOT NULL,
    reorder_level integer NOT NULL CHECK (reorder_level >= 0),
    target_level  integer NOT NULL CHECK (target_level > reorder_level)
);

-- Deliveries are positive, sales and write-offs negative.
CREATE TABLE stock_movements (
    id       integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku      text NOT NULL REFERENCES products (sku),
    quantity integer NOT NULL CHECK (quantity <> 0),
    moved_on date NOT NULL
);
