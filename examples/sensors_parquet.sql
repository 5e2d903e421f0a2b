-- Several means over a parquet file, with a fixed split of ε and a mechanism override. Run from the root:
--     ldpql --evaluate --seed 7 examples/sensors_parquet.sql
CREATE TABLE sensors FROM 'examples/data/sensors.parquet' (
    temperature PRIVATE BETWEEN -10 AND 50 NOT NULL,   -- no NULLs: the unconditional mechanisms apply
    humidity    PRIVATE BETWEEN 0 AND 100 NOT NULL,
    vibration   PRIVATE BETWEEN 0 AND 2 NOT NULL,
    site        PUBLIC
) PRIVACY UNIT device BUDGET EPSILON 3;

SELECT site, LDP_AVG(temperature), LDP_AVG(humidity), LDP_AVG(vibration) FROM sensors GROUP BY site EPSILON 1;
SELECT LDP_AVG(temperature, epsilon => 0.7), LDP_AVG(humidity) FROM sensors EPSILON 1;
SELECT LDP_AVG(vibration) FROM sensors EPSILON 1 OPTIONS (mechanism = 'piecewise', confidence = 0.9);
SHOW LEDGER sensors;
