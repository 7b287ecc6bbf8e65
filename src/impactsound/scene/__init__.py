"""Scene description: TOML schema, primitives, bodies, listeners."""
from .model import Air, Body, Ground, Listener, Scene
from .debris import debris_scene
from .schema import demo_scene_path, load_scene, parse_scene

__all__ = ["Air", "Body", "Ground", "Listener", "Scene", "debris_scene", "demo_scene_path", "load_scene",
           "parse_scene"]
