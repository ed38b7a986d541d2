"""The view layer: the desktop viewer (`viewer`, MuJoCo's own) and the browser viewer (`web`).
"""
