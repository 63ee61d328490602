-- The table the sidecar inserts into (or let it create one: `create_table: true` in querylog.yaml).
CREATE DATABASE IF NOT EXISTS querylog;
CREATE TABLE IF NOT EXISTS querylog.protected
(
    user_id String,
    q       String,
    ts      DateTime,
    rank    Nullable(String),
    url     Nullable(String)
)
ENGINE = MergeTree
ORDER BY ts;
