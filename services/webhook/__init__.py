"""Kueue's job admission webhooks as a service: AdmissionReview over HTTPS, certificates kept current."""
