"""The local run: the rendered script trained on this CPU under torchrun with gloo, with a stand-in for
torch.sagemaker, and the checks that judge it (loss falls, checkpoints resume) before a job is paid for."""
