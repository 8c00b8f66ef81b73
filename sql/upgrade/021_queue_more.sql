-- 021_queue_more: more of issue 39.
--
-- pause() and resume() steer an outbox captured in its table too: every
-- relay claim is gated by the queue's row of pgoutbox.queue_controls
-- (src/lib/relay/claim.c).  Function bodies only (pause, resume,
-- queue_controls_check, set_queue): definitions.sql redoes them.
SELECT 1;
