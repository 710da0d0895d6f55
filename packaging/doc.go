// Package packaging holds the release packaging: the nfpm configurations of
// the edgeagent and edgecoord .deb packages, their maintainer scripts, and
// dist.sh, which `make dist` runs to build the per-platform archives and
// the packages. Its test builds the edgeagent .deb, checks its contents
// against docs/install.md and installs it.
package packaging
