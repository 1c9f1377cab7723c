-- What to order: every product at or below its reorder level, topped up to its target.
CREATE VIEW reorder_list AS
SELECT sku, name, on_hand, target_level - on_hand AS to_order
FROM (
    SELECT p.sku, p.name, p.reorder_level, p.target_level,
           coalesce(sum(m.quantity), 0)::integer AS on_hand
    FROM products p
    LEFT JOIN stock_movements m ON m.sku = p.sku
    GROUP BY p.sku
) AS stock
WHERE on_hand <= reorder_level
ORDER BY on_hand ASC, sku ASC;
