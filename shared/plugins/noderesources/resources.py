"""The resources NodeResourcesFit accounts and the reasons naming one a node lacks.

Resource names are classified as k8s.io/kubernetes/pkg/apis/core/v1/helper does:
framework.Resource keeps cpu, memory, ephemeral-storage and the scalar resources
(extended, hugepages-*, kubernetes.io/ prefixed, attachable-volumes-*).
"""

from __future__ import annotations

from shared.api.resources import HUGEPAGES_PREFIX
from shared.api.validation import qualified_name_errors

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

REASON_TOO_MANY_PODS = "Too many pods"


def insufficient_reason(resource: str) -> str:
    return f"Insufficient {resource}"


_RESOURCE_DEFAULT_NAMESPACE_PREFIX = "kubernetes.io/"
_DEFAULT_RESOURCE_REQUESTS_PREFIX = "requests."
_ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"


def is_qualified_name(value: str) -> bool:
    """validation.IsQualifiedName: [DNS-subdomain prefix '/'] name of at most 63 characters."""
    return not qualified_name_errors(value)


def is_prefixed_native_resource(name: str) -> bool:
    return _RESOURCE_DEFAULT_NAMESPACE_PREFIX in name


def is_extended_resource_name(name: str) -> bool:
    """Not native (has a '/' outside kubernetes.io), and valid as a quota name."""
    if "/" not in name or is_prefixed_native_resource(name):
        return False
    if name.startswith(_DEFAULT_RESOURCE_REQUESTS_PREFIX):
        return False
    return is_qualified_name(_DEFAULT_RESOURCE_REQUESTS_PREFIX + name)


def is_scalar_resource_name(name: str) -> bool:
    """The names framework.Resource keeps in ScalarResources; others are not accounted."""
    return (
        is_extended_resource_name(name)
        or name.startswith(HUGEPAGES_PREFIX)
        or is_prefixed_native_resource(name)
        or name.startswith(_ATTACHABLE_VOLUMES_PREFIX)
    )
