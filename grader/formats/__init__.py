"""The file formats users write against, as frozen pydantic models (see docs/formats.md)."""
