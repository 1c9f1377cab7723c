CREATE TABLE subscriptions (
    id         integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer   text NOT NULL,
    plan       text NOT NULL,
    started_on date NOT NULL,
    -- The last day of access; NULL while the subscription is open.
    ended_on   date CHECK (ended_on >= started_on)
);
