-- triggers.sql: the triggers on pgoutbox's own tables.  Created once, by a
-- fresh install (a change to one is an upgrade step); the functions they
-- run are in functions/.

-- Wake-up: one NOTIFY per inserting statement, and only while a relay
-- sleeps on the queue (pgoutbox.wake_relay).
CREATE TRIGGER outbox_notify AFTER INSERT ON pgoutbox.outbox
    FOR EACH STATEMENT EXECUTE FUNCTION pgoutbox.wake_relay();

-- Every queue created later gets the outbox's shape (pgoutbox.add_caps).
CREATE TRIGGER queues_caps AFTER INSERT ON pgoutbox.queues
    FOR EACH ROW EXECUTE FUNCTION pgoutbox.caps_on_new_queue();
