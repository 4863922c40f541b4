"""The controller of Kueue's ProvisioningRequest admission check (``kueue-es service provisioning``)."""
