"""Face analysis backends: detection, 478-point mesh, identity; a Protocol and a registry each."""
