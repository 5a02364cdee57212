// A stored picture's thumbnail (fetched once per session), or a note that
// the picture is not kept any more.

import { useEffect, useState } from "preact/hooks";
import { useCake } from "./context";

export function PictureThumbnail({ id, name }: { id: string; name?: string }) {
  const cake = useCake();
  const [url, setUrl] = useState<string | null>(null);
  const [missing, setMissing] = useState(false);
  useEffect(() => {
    let live = true;
    setUrl(null);
    setMissing(false);
    cake.pictures.thumbnail(id).then(
      (found) => live && setUrl(found),
      () => live && setMissing(true),
    );
    return () => {
      live = false;
    };
  }, [cake, id]);

  if (missing) {
    return (
      <span class="picture-thumbnail missing" data-testid="picture-missing">
        Picture not kept
      </span>
    );
  }
  if (url === null) return <span class="picture-thumbnail loading" aria-label="Loading the picture" />;
  return (
    <img
      class="picture-thumbnail"
      data-testid="picture-thumbnail"
      data-picture-id={id}
      src={url}
      alt={name ?? "Picture"}
    />
  );
}
