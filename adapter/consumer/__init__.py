"""The drop-in ``PushConsumer``: poll loop, callback dispatch, offsets, send-back, settings."""
