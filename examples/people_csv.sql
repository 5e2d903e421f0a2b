-- A scripted analysis over a CSV file. Run from the repository root:
--     ldpql --evaluate --seed 7 examples/people_csv.sql
CREATE TABLE people FROM 'examples/data/people.csv' (
    age    PRIVATE INTEGER BETWEEN 0 AND 120 NOT NULL,
    income PRIVATE BETWEEN 0 AND 250000 NOT NULL,
    city   PRIVATE IN ('Paris', 'Lyon', 'Nice'),
    region PUBLIC
) PRIVACY UNIT person_id BUDGET EPSILON 4;

DESCRIBE people;

-- Price the statement first: EXPLAIN reads no private value and spends nothing.
EXPLAIN SELECT LDP_MEAN(income), LDP_HISTOGRAM(city) FROM people EPSILON 1;

SELECT region, LDP_MEAN(income) FROM people GROUP BY region EPSILON 1;
SELECT LDP_HISTOGRAM(city) FROM people WHERE region = 'north' EPSILON 0.5;
SELECT LDP_COUNT(age >= 65) AS seniors, LDP_SUM(income) AS total_income FROM people EPSILON 1;

SHOW BUDGET people;
