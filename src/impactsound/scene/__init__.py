"""Scene description: TOML schema, primitives, bodies, listeners."""
from .model import Air, Body, Ground, Listener, Scene
from .schema import demo_scene_path, load_scene, parse_scene

__all__ = ["Air", "Body", "Ground", "Listener", "Scene", "demo_scene_path", "load_scene", "parse_scene"]
