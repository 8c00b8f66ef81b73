-- 021_queue_more: more of issue 39.
--
-- pause() and resume() steer an outbox captured in its table too: every
-- relay claim is gated by the queue's row of pgoutbox.queue_controls
-- (src/lib/relay/claim.c).  replay(queue, from_ts, to_ts, topic, key,
-- from_id, to_id) queues archived events again.  Function bodies and a
-- new function only (pause, resume, queue_controls_check, set_queue,
-- replay): definitions.sql makes them.
SELECT 1;
