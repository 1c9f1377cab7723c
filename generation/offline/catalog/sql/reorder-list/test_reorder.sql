CREATE FUNCTION test_reorder_after_a_busy_week() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO products VALUES
        ('TEA-EB', 'English breakfast tea', 10, 40),
        ('TEA-GR', 'Green tea', 5, 20),
        ('MUG-WH', 'White mug', 6, 24),
        ('KET-01', 'Kettle', 2, 8),
        ('CUP-SET', 'Cup and saucer set', 3, 9);  -- never delivered
    INSERT INTO stock_movements (sku, quantity, moved_on) VALUES
        ('TEA-EB', 40, '2024-05-01'), ('TEA-EB', -30, '2024-05-03'),  -- 10: at its level
        ('TEA-GR', 20, '2024-05-01'), ('TEA-GR', -14, '2024-05-04'),  -- 6: above
        ('MUG-WH', 24, '2024-05-01'), ('MUG-WH', -24, '2024-05-05'),  -- sold out
        ('KET-01', 8, '2024-05-01'), ('KET-01', -8, '2024-05-02');    -- sold out
    RETURN NEXT results_eq(
        'SELECT * FROM reorder_list',
        $$VALUES ('CUP-SET'::text, 'Cup and saucer set'::text, 0, 9),
                 ('KET-01', 'Kettle', 0, 8),
                 ('MUG-WH', 'White mug', 0, 24),
                 ('TEA-EB', 'English breakfast tea', 10, 30)$$,
        'the reorder list after a week of sales'
    );
END
$test$;

CREATE FUNCTION test_reorder_with_write_offs() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO products VALUES
        ('MILK-1L', 'Milk 1 l', 12, 48),
        ('EGG-6', 'Eggs, box of 6', 8, 30),
        ('BREAD', 'Sourdough loaf', 4, 10),
        ('JAM', 'Strawberry jam', 2, 6),  -- new in the range, nothing delivered yet
        ('HONEY', 'Clover honey', 2, 6);  -- new too
    INSERT INTO stock_movements (sku, quantity, moved_on) VALUES
        ('MILK-1L', 48, '2024-06-01'), ('MILK-1L', -30, '2024-06-02'),
        ('MILK-1L', -6, '2024-06-03'),                                 -- 12: at its level
        ('EGG-6', 30, '2024-06-01'), ('EGG-6', -21, '2024-06-02'),     -- 9: above
        ('BREAD', 10, '2024-06-01'), ('BREAD', -8, '2024-06-01');      -- 2
    RETURN NEXT results_eq(
        'SELECT * FROM reorder_list',
        $$VALUES ('HONEY'::text, 'Clover honey'::text, 0, 6),
                 ('JAM', 'Strawberry jam', 0, 6),
                 ('BREAD', 'Sourdough loaf', 2, 8),
                 ('MILK-1L', 'Milk 1 l', 12, 36)$$,
        'write-offs count against stock'
    );
END
$test$;

CREATE FUNCTION test_reorder_ties_in_sku_order() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO products VALUES
        ('B-200', 'Bolt M8', 50, 200),
        ('A-100', 'Anchor plug', 50, 150),
        ('C-300', 'Cable tie', 20, 100),
        ('D-400', 'Drill bit', 5, 15);  -- never delivered
    INSERT INTO stock_movements (sku, quantity, moved_on) VALUES
        ('B-200', 200, '2024-07-01'), ('B-200', -150, '2024-07-08'),  -- 50: at its level
        ('A-100', 150, '2024-07-01'), ('A-100', -100, '2024-07-09'),  -- 50: at its level
        ('C-300', 100, '2024-07-01'), ('C-300', -79, '2024-07-10');   -- 21: above
    RETURN NEXT results_eq(
        'SELECT * FROM reorder_list',
        $$VALUES ('D-400'::text, 'Drill bit'::text, 0, 15),
                 ('A-100', 'Anchor plug', 50, 100),
                 ('B-200', 'Bolt M8', 50, 150)$$,
        'equal stock is listed by SKU'
    );
END
$test$;
