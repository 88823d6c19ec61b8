"""What changes a face: swap and fusion (effects and enhancers stack here later)."""
