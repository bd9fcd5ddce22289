# The application image with the static `vigil` added (deploy/fargate/README.md). The `vigil`
# image holds only /vigil (Containerfile at the repository root, or `make image`); the binary
# needs nothing from the application image, whatever its distribution or libc.
#
#   buildah build -f deploy/fargate/Containerfile.app \
#     --build-arg VIGIL_IMAGE=123456789012.dkr.ecr.us-east-1.amazonaws.com/vigil:0.1.0 \
#     --build-arg APP_IMAGE=123456789012.dkr.ecr.us-east-1.amazonaws.com/my-app:1.4.2 \
#     -t 123456789012.dkr.ecr.us-east-1.amazonaws.com/my-app:1.4.2-vigil .
ARG VIGIL_IMAGE=vigil:0.1.0
ARG APP_IMAGE
FROM ${VIGIL_IMAGE} AS vigil

FROM ${APP_IMAGE}
COPY --from=vigil /vigil /usr/local/bin/vigil
