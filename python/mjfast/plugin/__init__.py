"""The plugin layer: what a plugin is (`base`: the classes a plugin derives from and the context
it is handed), how it is configured (`config`, `schema`), found (`discovery`) and described when
it is compiled (`native`). It uses the model and the bus; it never imports the env.
"""
