-- 025_slot_database: create_queue(..., capture => 'wal') refuses a
-- replication slot of its name that belongs to another database (slot
-- names are the cluster's), as adopt(..., p_capture => 'wal') does; it
-- used to take that slot for the new queue, whose relay then could not
-- stream it.  A body change only: the definitions of this version
-- replace the function.  Older binaries are unaffected.
SELECT 1;
