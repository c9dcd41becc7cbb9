"""Kubelet device-plugin gRPC servers, Allocate, preferred allocation."""
