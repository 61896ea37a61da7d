"""Pravega segment-store adapter (protocols/pravega.md): wire codec, sessions, controller facade."""
