"""Text embedding backends: the 'embed' capability (retrieval embeddings for passages)."""
