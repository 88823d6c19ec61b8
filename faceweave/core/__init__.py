"""Pure numpy/OpenCV building blocks: geometry, rasterisation, colour, lighting, blending."""
