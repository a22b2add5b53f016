"""Tests against a real Kubernetes control plane (etcd, kube-apiserver, kwok fake nodes)."""
