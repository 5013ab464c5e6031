#!/bin/sh
# edits only the legacy config.kubernetes.io/path of deployment.yaml's resources
sed "s#^\( *\)config.kubernetes.io/path: 'deployment.yaml'#\1config.kubernetes.io/path: 'newfilename.yaml'#"
