"""Kueue's job framework as a library (``kueue_es.jobframework``): one place for what both edges share.

Why this package exists: the watcher turns Jobs, JobSets and Pods into
workloads, and the dispatcher writes back to the same objects; the conversion,
the annotations and the pod helpers they both need live here, so neither
service imports the other.
"""
