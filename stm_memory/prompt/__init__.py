"""What the model is sent, pure: assembling the memory block, rendering it, cutting the
history it covers, placing block and nudge, and counting tokens."""
