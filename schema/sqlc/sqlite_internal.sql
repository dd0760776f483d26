-- SQLite's own tables, which SQLite creates itself (sqlite_sequence for
-- AUTOINCREMENT, sqlite_master for the schema). They are declared here for
-- sqlc only, so that queries reading them compile; never applied.
CREATE TABLE sqlite_sequence (name TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE sqlite_master (type TEXT NOT NULL, name TEXT NOT NULL, tbl_name TEXT NOT NULL, rootpage INTEGER NOT NULL, sql TEXT);
-- PRAGMA data_version read as its table-valued function (an eponymous
-- virtual table SQLite provides on every connection).
CREATE TABLE pragma_data_version (data_version INTEGER NOT NULL);
-- PRAGMA user_version and PRAGMA foreign_keys, read the same way.
CREATE TABLE pragma_user_version (user_version INTEGER NOT NULL);
CREATE TABLE pragma_foreign_keys (foreign_keys INTEGER NOT NULL);
CREATE TABLE pragma_cache_size (cache_size INTEGER NOT NULL);
CREATE TABLE pragma_encoding (encoding TEXT NOT NULL);
