# syntax=docker/dockerfile:1
#
# Herald container image: build once with the locked dependency set, run as a non-root user
# with all state under /data.
#
#   docker build -t herald:0.1.0 .
#   docker run -p 8080:8080 -v herald-data:/data -e HERALD_WEB__TOKEN=change-me herald:0.1.0
#
# The image listens on 0.0.0.0:8080, and Herald refuses to start on a non-loopback address
# without a web token: set HERALD_WEB__TOKEN (or web.token in a mounted config file).

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY migrations ./migrations
COPY config ./config
# The dev-only test-support crates are workspace members and Cargo.toml declares [[bench]]
# targets: cargo reads both (a declared bench whose file is missing stops the build) and builds
# neither here. tests/it/deploy_files/docker_context.rs resolves exactly this context.
COPY test-support ./test-support
COPY benches ./benches
# Cache mounts keep the registry and the target dir between builds (BuildKit); the binary is
# copied out because a cache mount is not part of the image layer.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin herald \
    && cp target/release/herald /usr/local/bin/herald \
    && strip /usr/local/bin/herald

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 herald \
    && useradd --system --uid 10001 --gid herald --home-dir /data --shell /usr/sbin/nologin herald \
    && mkdir -p /data /etc/herald \
    && chown herald:herald /data
COPY --from=build /usr/local/bin/herald /usr/local/bin/herald
COPY deploy/docker/healthcheck /usr/local/bin/herald-healthcheck
COPY config/herald.example.toml /etc/herald/herald.example.toml

ENV HERALD_SERVER__DATA_DIR=/data \
    HERALD_SERVER__LISTEN=0.0.0.0:8080
VOLUME /data
EXPOSE 8080
USER herald:herald
WORKDIR /data

# Liveness only (the process answers HTTP); readiness (/readyz: store reachable, migrations
# applied) is for orchestrators that route traffic, see deploy/k8s/.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/herald-healthcheck"]

ENTRYPOINT ["herald"]
CMD ["serve"]
