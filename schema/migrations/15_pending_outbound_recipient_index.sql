-- Version 15 (milestone 22): the per-recipient page of pending outbound
-- messages walks this index in sequence order. Nothing else changes.
CREATE INDEX pending_outbound_message_recipient
  ON pending_outbound_message (recipient_user_id, recipient_device_id, sequence);
