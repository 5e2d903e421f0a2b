-- The embedded demo table (synthetic; regenerate with scripts/make_demo.py).
CREATE TABLE people FROM '{path}' (
    age    PRIVATE INTEGER BETWEEN 0 AND 120,
    income PRIVATE BETWEEN 0 AND 250000,
    city   PRIVATE IN ('Paris', 'Lyon', 'Marseille', 'Toulouse', 'Nice'),
    smoker PRIVATE BOOLEAN,
    region PUBLIC
) PRIVACY UNIT person_id BUDGET EPSILON 4;
