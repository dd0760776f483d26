-- Run after the rebuild has committed, outside any transaction (VACUUM
-- cannot run inside one): the dropped legacy table's pages held
-- application plaintext. VACUUM rewrites the file without those free
-- pages, and the checkpoint empties the WAL, which held them too.
VACUUM;
PRAGMA wal_checkpoint(TRUNCATE);
