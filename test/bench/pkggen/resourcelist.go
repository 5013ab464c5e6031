package pkggen

import (
	"fmt"
	"strings"
)

// ResourceList is n resources as one function's input (the runtime
// benchmarks' shape, not the package's): a third each ConfigMaps,
// Deployments with a pod template and Services, and a ConfigMap
// functionConfig whose data is the one line data ("namespace: bench").
func ResourceList(n int, data string) string {
	var sb strings.Builder
	sb.WriteString("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n")
	for i := 0; i < n; i++ {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&sb, "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm-%d\n    namespace: old\n  data:\n    key: value-%d\n    other: x\n", i, i)
		case 1:
			fmt.Fprintf(&sb, "- apiVersion: apps/v1\n  kind: Deployment\n  metadata:\n    name: web-%d\n    labels:\n      app: web-%d\n  spec:\n    replicas: 2\n    selector:\n      matchLabels:\n        app: web-%d\n    template:\n      metadata:\n        labels:\n          app: web-%d\n      spec:\n        containers:\n        - name: web\n          image: nginx:1.27\n          ports:\n          - containerPort: 80\n", i, i, i, i)
		default:
			fmt.Fprintf(&sb, "- apiVersion: v1\n  kind: Service\n  metadata:\n    name: svc-%d\n  spec:\n    selector:\n      app: web-%d\n    ports:\n    - port: 80\n      targetPort: 80\n", i, i)
		}
	}
	sb.WriteString("functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fn\n  data:\n    " + data + "\n")
	return sb.String()
}
