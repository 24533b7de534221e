//! HTCondor's job ad (being written by a helper; see the task spec).
