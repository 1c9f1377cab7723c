# A stand-in for the registry's postgres:15-bookworm, built from a local Debian base (see
# scripts/docker-check): Debian's PostgreSQL 15, run by an entry point that honours the
# official image's POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB on the first start and
# passes its arguments to `postgres`, run as the postgres user.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
# Debian's package makes a cluster of its own unless told not to: the entry point makes one.
RUN mkdir -p /etc/postgresql-common/createcluster.d \
    && echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.d/none.conf \
    && apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data \
    && install -d -o postgres -g postgres -m 2775 /var/run/postgresql
COPY --chmod=0755 postgres-entrypoint /usr/local/bin/postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
STOPSIGNAL SIGINT
ENTRYPOINT ["postgres-entrypoint"]
CMD ["postgres"]
