# hookproxy image: a static binary on a distroless base, running as a non-root user.
#
#   docker build -t hookproxy .
#   docker run --rm -p 127.0.0.1:8080:8080 hookproxy            # serve: secrets + tools in front of OpenAI and Anthropic
#   docker run --rm -p 127.0.0.1:8080:8080 hookproxy demo --listen 0.0.0.0:8080   # the offline demo
#   docker run --rm -p 127.0.0.1:8787:8787 hookproxy backend --listen 0.0.0.0:8787 # the policies as an AHP backend
#
# Without --config, serve and backend read /etc/hookproxy/hookproxy.yaml ($HOOKPROXY_CONFIG):
# the embedded default's routes and policies, listening on all interfaces of the container.
# Mount your own configuration over it, or pass --config.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/hookproxy ./cmd/hookproxy

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hookproxy /usr/local/bin/hookproxy
COPY deploy/docker/hookproxy.yaml /etc/hookproxy/hookproxy.yaml
COPY config/default-registration.json /etc/hookproxy/registration.json
ENV HOOKPROXY_CONFIG=/etc/hookproxy/hookproxy.yaml
# distroless's nonroot user, numeric so that runAsNonRoot checks can verify it.
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["hookproxy"]
CMD ["serve"]
