-- The embedded demo table (synthetic; regenerate with scripts/make_demo.py).
CREATE TABLE people FROM '{path}' (
    age    PRIVATE INTEGER BETWEEN 0 AND 120 NOT NULL,
    income PRIVATE BETWEEN 0 AND 250000,          -- 0.5% NULL: LDP_AVG(income) is over the users with a value
    city   PRIVATE IN ('Paris', 'Lyon', 'Marseille', 'Toulouse', 'Nice'),
    smoker PRIVATE BOOLEAN,
    region PUBLIC
) PRIVACY UNIT person_id BUDGET EPSILON 4;
