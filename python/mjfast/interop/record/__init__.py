"""Recording and replay (SPEC §20): the bag's layout (`layout`), the recorder (`recorder`), the
child process that writes the bag (`writer`), reading a bag (`reader`) and replaying it
(`replay`). `mjfast.recording` is the recorder's public path.
"""
