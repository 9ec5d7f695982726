"""One episode's conversation: the system prompt, the history, and what the model sees of it.

Kept apart from :class:`~vista_rl.rollout.episode.EpisodeDriver` so that the driver's state is the
episode's rules and this is only the messages: the history keeps the env's own images (tools crop
those: :attr:`Conversation.images_seen`), while :meth:`Conversation.chat` is what the model is shown
next, windowed (``rollout.window_size``) with each image at ``rollout.image_size``.
"""

from __future__ import annotations

from PIL import Image

from vista_rl.config import RolloutSection
from vista_rl.observation import Chat, Message
from vista_rl.rollout.context import window


def shown(message: Message, size: int | None) -> Message:
    """``message`` with each image resized to ``size`` x ``size`` (``rollout.image_size``; BOX, as the
    local engine's encoder resizes), or unchanged."""
    if size is None or not message.images or all(image.size == (size, size) for image in message.images):
        return message
    images = [image if image.size == (size, size) else image.resize((size, size), Image.Resampling.BOX)
              for image in message.images]
    return Message(message.role, message.content, images)


class Conversation:
    """The messages of one episode (not thread-safe: one caller)."""

    def __init__(self, settings: RolloutSection) -> None:
        self._window_size = settings.window_size
        self._image_size = settings.image_size
        self.system: Message | None = None
        self.history: list[Message] = []
        #: every image the env has shown, in order (what a tool may look at)
        self.images_seen: list[Image.Image] = []
        #: history messages as the model sees them (``rollout.image_size``), by the message's id
        self._shown: dict[int, tuple[Message, Message]] = {}

    @property
    def last(self) -> Message:
        """The message the model answers next (the latest observation)."""
        return self.history[-1]

    def add_user(self, message: Message) -> None:
        """An observation (or tool results, or a reflection prompt) shown to the model."""
        self.history.append(message)
        self.images_seen.extend(message.images)

    def add_assistant(self, content: str) -> None:
        self.history.append(Message("assistant", content))

    def chat(self) -> Chat:
        """What the model sees next: the system prompt and the history, windowed, each image at
        ``rollout.image_size``."""
        system = [self.system] if self.system is not None else []
        size = self._image_size
        if size is None:
            return system + window(self.history, self._window_size)
        out = []
        for message in window(self.history, self._window_size):
            if id(message) not in self._shown:
                self._shown[id(message)] = (message, shown(message, size))  # the message kept alive with its id
            out.append(self._shown[id(message)][1])
        return system + out
