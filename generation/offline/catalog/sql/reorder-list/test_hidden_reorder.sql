CREATE FUNCTION test_hidden_reorder_after_returns() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO products VALUES
        ('PEN-BL', 'Blue pen', 20, 100),
        ('PEN-RD', 'Red pen', 20, 100),
        ('INK-01', 'Ink bottle', 3, 12);
    INSERT INTO stock_movements (sku, quantity, moved_on) VALUES
        ('PEN-BL', 100, '2025-02-01'), ('PEN-BL', -85, '2025-02-03'),  -- 15: below
        ('PEN-RD', 50, '2025-02-01'), ('PEN-RD', -30, '2025-02-02'),   -- 20: at its level
        ('INK-01', 12, '2025-02-01'), ('INK-01', -10, '2025-02-02'),
        ('INK-01', 5, '2025-02-03');                                    -- 7: above
    RETURN NEXT results_eq(
        'SELECT * FROM reorder_list',
        $$VALUES ('PEN-BL'::text, 'Blue pen'::text, 15, 85),
                 ('PEN-RD', 'Red pen', 20, 80)$$,
        'the reorder list after a week of pens'
    );
END
$test$;

CREATE FUNCTION test_hidden_reorder_of_nothing_low() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO products VALUES ('CLIP', 'Paper clips', 0, 500);
    INSERT INTO stock_movements (sku, quantity, moved_on) VALUES ('CLIP', 300, '2025-02-01');
    RETURN NEXT is_empty('SELECT * FROM reorder_list', 'nothing to reorder');
END
$test$;
