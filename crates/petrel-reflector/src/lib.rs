//! Petrel's DraARLv1 voice reflector: codec, sessions, talkgroups, fan-out, store.
